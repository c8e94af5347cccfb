package client_test

import (
	"fmt"
	"log"
	"os"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
)

func ExampleToolSchema() {
	schema, err := client.ToolSchema(client.FormatAnthropic, client.ToolOptions{Languages: []string{"python"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(schema) > 0)
	// Output: true
}

// A reviewer's view of code that hides a right-to-left override: WriteJSON escapes it, and the
// warning says where it is.
func ExampleWriteJSON() {
	code := "ok = False # \u202e ;ok = True\n"
	list := guard.SuspiciousCharacters(code)
	_ = client.WriteJSON(os.Stdout, map[string]any{"code": code, "suspicious_characters": list})
	fmt.Println(client.SuspiciousWarning(list))
	// Output:
	// {"code":"ok = False # \u202e ;ok = True\n","suspicious_characters":[{"line":1,"column":14,"rune":"U+202E","name":"RIGHT-TO-LEFT OVERRIDE"}]}
	// WARNING: the code holds 1 invisible or direction-changing character(s) that may make it read differently from how it runs: U+202E RIGHT-TO-LEFT OVERRIDE at line 1 column 14
}
