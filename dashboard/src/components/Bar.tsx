/** A bar as wide as `value` of `max` (the number beside it carries the meaning). */
export function Bar({ value, max }: { value: number; max: number }) {
  const width = max > 0 ? Math.max(2, Math.round((100 * value) / max)) : 0;
  return <span className="bar" style={{ width: `${width}%` }} aria-hidden="true" />;
}
