import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The app is served by the tarsy binary under /ui/ (see operator/api/src/dashboard.rs).
// `npm run dev` proxies the API to a `tarsy serve` on 127.0.0.1:8080.
export default defineConfig({
  base: '/ui/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // Styles and scripts are files (the CSP allows no inline code).
    assetsInlineLimit: 0,
    sourcemap: false,
  },
  server: {
    proxy: {
      '/api': { target: 'http://127.0.0.1:8080', ws: true },
      '/health': 'http://127.0.0.1:8080',
    },
  },
});
