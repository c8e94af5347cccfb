//go:build !unix

package devserver

import "os"

// lockFile does nothing on systems without flock: there a second dev server on the same DataDir
// is not detected.
func lockFile(*os.File) error { return nil }
