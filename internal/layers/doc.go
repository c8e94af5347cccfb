// Package layers holds the tests that keep the house's rules; it has no code of its own.
//
// The import layers: the ground floor (guard, approval, receipt, codec, egress, contract, rules) imports
// nothing above it and no internal/ package that imports ours; leaf helpers import nothing of
// ours; test kits (internal/testkit) are imported by tests only; the worker's assembly
// (worker/service) only by its command and tests.
//
// The manual: README.md stays at most 400 lines; every relative link in README.md and
// docs/**/*.md names a file that exists, and a heading there for a link with an #anchor; no
// document but docs/benchmarks.md reads as a development log. Every Go package has a doc comment.
package layers
