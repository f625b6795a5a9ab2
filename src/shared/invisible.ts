// The characters that change how a text reads without being seen, defined once for every place that
// shows or carries text from a monitored database (the dashboard, log lines, mails, the doctor's pasted
// commands): bidirectional marks, embeddings, overrides and isolates (the "Trojan Source" trick),
// zero-width and other invisible format characters, line and paragraph separators, fillers that draw
// as blank (Hangul), interlinear annotation marks, variation selectors, and the tag characters
// U+E0000–E007F, which spell ASCII text that no font draws ("ASCII smuggling"). Each destination adds
// the control characters it must also escape and escapes them its own way.

/** The characters above, as the body of a regular expression's character class (needs the `u` flag). */
export const HIDDEN_CHARACTERS =
  '\\u00ad\\u034f\\u061c\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u3164' +
  '\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff9-\\ufffb\\u{1d173}-\\u{1d17a}\\u{e0000}-\\u{e007f}\\u{e0100}-\\u{e01ef}'
