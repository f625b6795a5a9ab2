// CSS files imported from TSX for their side effect: Bun bundles them into the page's stylesheet.
declare module '*.css'
