// Package pysource knows how the Python interpreter (and sh, which hands Python its lines) reads
// source and finds modules, so that what a reviewer reads is what runs: PEP 263 coding
// declarations, indentation and tab stops, line ends and form feeds, here-documents, Unicode
// characters a reader cannot see (bidirectional controls, zero-width and format characters),
// names that read as other names (mixed scripts, lookalike letters, NFKC), the files the
// interpreter may run on its own at start-up (.pth files, sitecustomize, bytecode, native
// modules, archives), input modules that shadow the standard library or each other, and the
// flags every backend starts Python with.
//
// It is a leaf: it imports nothing of sandboxflow. The Check functions return an *Error naming
// the file and line; guard refuses a request with it, and the views (starter, inbox, client,
// notify, mcpserver) use the rest to draw code as Python reads it (VisibleText, ShowTabs,
// QuoteValue) and to warn of what may run unseen (SuspiciousCharacters, StartupWarnings,
// ConfusableNames).
package pysource
