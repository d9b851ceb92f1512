import { Link } from 'react-router';

export function NotFoundPage({ what }: { what?: string }) {
  return (
    <section className="not-found" aria-labelledby="not-found-title">
      <h1 id="not-found-title">Not found</h1>
      <p>{what ?? 'There is no page at this address.'}</p>
      <p>
        <Link to="/">Back to the sessions</Link>
      </p>
    </section>
  );
}
