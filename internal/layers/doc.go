// Package layers holds the test that keeps the house's floors in order: the ground floor
// (guard, approval, receipt, codec, egress, contract) imports nothing above it and no internal/ package
// that imports ours; leaf helpers import nothing of ours; test kits (internal/testkit) are
// imported by tests only; the worker's assembly (worker/service) only by its command and tests.
// It has no code of its own.
package layers
