package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reflecttest"
)

// TestPrintResultKeepsEveryField: `starter result`, `run --wait` and `approve --wait` print every
// field of the result (walked by reflection, so a field added later is covered), and what they
// print reads back as the same result.
func TestPrintResultKeepsEveryField(t *testing.T) {
	res := reflecttest.Filled[guard.Result](t)
	res.Outcome, res.Duration = guard.OutcomeFailed, 1500*time.Millisecond
	var out bytes.Buffer
	if err := printResult(&out, res); err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &keys); err != nil {
		t.Fatalf("printed %s: %v", out.Bytes(), err)
	}
	for _, name := range append(reflecttest.JSONNames[guard.Result](), "duration_ms") {
		if _, ok := keys[name]; !ok {
			t.Errorf("printed result lacks %q: %s", name, out.Bytes())
		}
	}
	var back guard.Result
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, res) {
		t.Errorf("printed result reads back as %+v; want %+v", back, res)
	}
}
