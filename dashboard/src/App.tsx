import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { lazy, Suspense } from 'react';
import { BrowserRouter, NavLink, Route, Routes } from 'react-router';
import { ConnectionBanner } from './components/ConnectionBanner';
import { NotFoundPage } from './pages/NotFoundPage';
import { SessionsPage } from './pages/SessionsPage';

// The list loads first; the other pages (and the markdown renderer the
// session page needs) load when first visited.
const SessionPage = lazy(() => import('./pages/SessionPage').then((m) => ({ default: m.SessionPage })));
const TracePage = lazy(() => import('./pages/TracePage').then((m) => ({ default: m.TracePage })));
const TriagePage = lazy(() => import('./pages/TriagePage').then((m) => ({ default: m.TriagePage })));
const QualityPage = lazy(() => import('./pages/QualityPage').then((m) => ({ default: m.QualityPage })));
const UsagePage = lazy(() => import('./pages/UsagePage').then((m) => ({ default: m.UsagePage })));
const MemoryPage = lazy(() => import('./pages/MemoryPage').then((m) => ({ default: m.MemoryPage })));
const ScoringPage = lazy(() => import('./pages/ScoringPage').then((m) => ({ default: m.ScoringPage })));
const SubmitPage = lazy(() => import('./pages/SubmitPage').then((m) => ({ default: m.SubmitPage })));
const SystemPage = lazy(() => import('./pages/SystemPage').then((m) => ({ default: m.SystemPage })));

function isFinalRefusal(error: unknown): boolean {
  if (!(error instanceof Error && 'status' in error && typeof error.status === 'number')) return false;
  return error.status >= 400 && error.status < 500 && error.status !== 408 && error.status !== 429;
}

const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      // Live data arrives over the WebSocket; refetches are triggered by its events.
      staleTime: 10_000,
      refetchOnWindowFocus: false,
      // A 4xx answer (a missing session, a window the API refuses) does not
      // change when asked again; a timeout or a rate limit may.
      retry: (count, error) => count < 2 && !isFinalRefusal(error),
    },
  },
});

export function App() {
  return (
    <QueryClientProvider client={queryClient}>
      <BrowserRouter basename="/ui">
        <a className="skip-link" href="#main">
          Skip to content
        </a>
        <header className="app-header">
          <span className="brand" aria-hidden="true">
            TARSy
          </span>
          <nav aria-label="Main">
            <NavLink to="/" end>
              Sessions
            </NavLink>
            <NavLink to="/triage">Triage</NavLink>
            <NavLink to="/quality">Quality</NavLink>
            <NavLink to="/usage">Usage</NavLink>
            <NavLink to="/memories">Memory</NavLink>
            <NavLink to="/submit">Submit alert</NavLink>
            <NavLink to="/system">System</NavLink>
          </nav>
        </header>
        <ConnectionBanner />
        <main id="main" tabIndex={-1}>
          <Suspense fallback={<p aria-busy="true">Loading…</p>}>
            <Routes>
              <Route path="/" element={<SessionsPage />} />
              <Route path="/sessions/:id" element={<SessionPage />} />
              <Route path="/sessions/:id/trace" element={<TracePage />} />
              <Route path="/sessions/:id/scoring" element={<ScoringPage />} />
              <Route path="/triage" element={<TriagePage />} />
              <Route path="/quality" element={<QualityPage />} />
              <Route path="/usage" element={<UsagePage />} />
              <Route path="/memories" element={<MemoryPage />} />
              <Route path="/submit" element={<SubmitPage />} />
              <Route path="/system" element={<SystemPage />} />
              <Route path="*" element={<NotFoundPage />} />
            </Routes>
          </Suspense>
        </main>
      </BrowserRouter>
    </QueryClientProvider>
  );
}
