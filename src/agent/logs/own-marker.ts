// The comment that leads every statement the agent sends (src/agent/own-statements.ts OWN_MARKER), here
// without that module's postgres.js import, which the log parser and classifier do not need;
// test/agent/log-events-hostile.test.ts holds the two equal.
export const OWN_MARKER = '/* dbm-agent */'
