package contract_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// envUpdateSchema, set to 1, rewrites docs/schema/ from the Go types.
const envUpdateSchema = "SANDBOXFLOW_UPDATE_SCHEMA"

// schemas are the JSON documents other languages read and write, by file name.
var schemas = []struct {
	file  string
	title string
	typ   reflect.Type
}{
	{"input.schema.json", "RunCode workflow input", reflect.TypeFor[contract.Input]()},
	{"decision.schema.json", "Reviewer decision (signal \"approval\", update \"decide\")", reflect.TypeFor[contract.Decision]()},
	{"status.schema.json", "RunCode status (query \"status\")", reflect.TypeFor[contract.Status]()},
	{"result.schema.json", "RunCode result", reflect.TypeFor[guard.Result]()},
	{"sandbox-claim.schema.json", "Sandbox host's claim on a run's approval (signal \"sandbox-claim\", plain JSON in history)", reflect.TypeFor[contract.SandboxClaim]()},
	{"late-result.schema.json", "A sandbox host's late result of a run whose activity the server timed out (signal \"late-result\")", reflect.TypeFor[contract.LateResult]()},
	{"session-input.schema.json", "Session workflow input", reflect.TypeFor[contract.SessionInput]()},
	{"cell-request.schema.json", "Session cell request (update \"submit-cell\")", reflect.TypeFor[contract.CellRequest]()},
	{"cell-decision.schema.json", "Reviewer decision for one cell (update \"decide-cell\")", reflect.TypeFor[contract.CellDecision]()},
	{"session-status.schema.json", "Session status (query \"session-status\")", reflect.TypeFor[contract.SessionStatus]()},
	{"session-result.schema.json", "Session result", reflect.TypeFor[contract.SessionResult]()},
	{"audit.schema.json", "A run's audit record (starter audit ID; starter audit --since T writes one a line)", reflect.TypeFor[contract.AuditRecord]()},
	{"audit-stream.schema.json", "An audit stream record (starter audit --follow writes one a line)", reflect.TypeFor[contract.AuditStreamRecord]()},
	{"live-output.schema.json", "Live output (the sandbox and cell activities' heartbeat details, read with DescribeWorkflowExecution)", reflect.TypeFor[contract.LiveOutput]()},
}

// extra are properties that a type's MarshalJSON adds beyond its Go fields, and overrides those
// whose JSON type is not the Go field's default.
var (
	durationSchema = map[string]any{"type": []any{"string", "integer"}, "pattern": "^([0-9.]+(ns|us|µs|ms|s|m|h))+$|^0$",
		"description": "A duration in Go's syntax such as \"30s\" (written so); a number is read as nanoseconds."}
	base64Schema = map[string]any{"type": "string", "contentEncoding": "base64"}
	extra        = map[reflect.Type]map[string]any{
		reflect.TypeFor[guard.Result](): {
			"stdout":      map[string]any{"type": "string", "description": "UTF-8 text; invalid bytes replaced by U+FFFD (then stdout_binary is true)."},
			"stderr":      map[string]any{"type": "string", "description": "UTF-8 text; invalid bytes replaced by U+FFFD (then stderr_binary is true)."},
			"duration_ms": map[string]any{"type": "integer", "description": "The duration in milliseconds."},
		},
		reflect.TypeFor[guard.File](): {
			"encoding": map[string]any{"type": "string", "enum": []any{"base64"}, "description": "How content is encoded."},
		},
	}
)

// schemaOf derives a JSON Schema from a Go type's JSON form.
func schemaOf(t reflect.Type) map[string]any {
	switch t {
	case reflect.TypeFor[time.Duration](), reflect.TypeFor[guard.Duration]():
		return durationSchema
	case reflect.TypeFor[time.Time]():
		return map[string]any{"type": "string", "format": "date-time"}
	case reflect.TypeFor[[]byte]():
		return base64Schema
	case reflect.TypeFor[guard.Outcome]():
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": []any{"array", "null"}, "items": schemaOf(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": []any{"object", "null"}, "additionalProperties": schemaOf(t.Elem())}
	case reflect.Struct:
		props := map[string]any{}
		for name, f := range jsonFields(t) {
			props[name] = schemaOf(f.Type)
		}
		for name, s := range extra[t] {
			props[name] = s
		}
		return map[string]any{"type": "object", "properties": props}
	}
	panic(fmt.Sprintf("schemaOf: no schema for %s", t))
}

// jsonFields returns a struct's fields by JSON name, embedded structs flattened.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for n, sf := range jsonFields(f.Type) {
				if _, ok := out[n]; !ok {
					out[n] = sf
				}
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func document(title string, t reflect.Type) []byte {
	s := schemaOf(t)
	doc := map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title}
	for k, v := range s {
		doc[k] = v
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

func TestSchemaFilesMatchTheGoTypes(t *testing.T) {
	dir := filepath.Join("..", "docs", "schema")
	for _, s := range schemas {
		t.Run(s.file, func(t *testing.T) {
			path := filepath.Join(dir, s.file)
			want := document(s.title, s.typ)
			if os.Getenv(envUpdateSchema) == "1" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (write it with %s=1 go test ./contract -run TestSchema)", err, envUpdateSchema)
			}
			var committed map[string]any
			if err := json.Unmarshal(got, &committed); err != nil {
				t.Fatalf("%s is not JSON: %v", path, err)
			}
			if missing := missingFields(s.typ, committed, s.typ.Name()); len(missing) > 0 {
				t.Errorf("%s lacks the fields %v of the Go types; update it (%s=1 go test ./contract -run TestSchema) and tell client authors", path, missing, envUpdateSchema)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from what the Go types give; run %s=1 go test ./contract -run TestSchema and review the diff", path, envUpdateSchema)
			}
		})
	}
}

// missingFields walks a Go type's JSON fields and lists, by path, those the schema does not
// describe.
func missingFields(t reflect.Type, schema map[string]any, at string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time](), t == reflect.TypeFor[[]byte]():
		return nil
	case t.Kind() == reflect.Slice:
		items, _ := schema["items"].(map[string]any)
		return missingFields(t.Elem(), items, at+"[]")
	case t.Kind() == reflect.Map:
		add, _ := schema["additionalProperties"].(map[string]any)
		return missingFields(t.Elem(), add, at+"{}")
	case t.Kind() != reflect.Struct:
		return nil
	}
	props, _ := schema["properties"].(map[string]any)
	var missing []string
	for name, f := range jsonFields(t) {
		sub, ok := props[name].(map[string]any)
		if !ok {
			missing = append(missing, at+"."+name)
			continue
		}
		missing = append(missing, missingFields(f.Type, sub, at+"."+name)...)
	}
	return missing
}

// TestSchemaCheckCatchesANewField shows that the check fails for a Go type with a field its
// schema lacks.
func TestSchemaCheckCatchesANewField(t *testing.T) {
	type grown struct {
		contract.Decision
		Added string `json:"added_field"`
	}
	var committed map[string]any
	b, err := os.ReadFile(filepath.Join("..", "docs", "schema", "decision.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &committed); err != nil {
		t.Fatal(err)
	}
	missing := missingFields(reflect.TypeFor[grown](), committed, "Decision")
	if len(missing) != 1 || missing[0] != "Decision.added_field" {
		t.Errorf("missing = %v; want [Decision.added_field]", missing)
	}
}
