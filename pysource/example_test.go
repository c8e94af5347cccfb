package pysource_test

import (
	"fmt"

	"github.com/sandboxflow/sandboxflow/pysource"
)

// Code may hold invisible or direction-changing characters; a reviewer sees each of them.
func ExampleSuspiciousCharacters() {
	code := "if access != 'user\u202e \u2066// admin\u2069 \u2066':\n"
	for _, s := range pysource.SuspiciousCharacters(code) {
		fmt.Println(s.Line, s.Column, s.Rune, s.Name)
	}
	fmt.Println(pysource.VisibleText(code))
	// Output:
	// 1 19 U+202E RIGHT-TO-LEFT OVERRIDE
	// 1 21 U+2066 LEFT-TO-RIGHT ISOLATE
	// 1 30 U+2069 POP DIRECTIONAL ISOLATE
	// 1 32 U+2066 LEFT-TO-RIGHT ISOLATE
	// if access != 'user\u202e \u2066// admin\u2069 \u2066':
}
