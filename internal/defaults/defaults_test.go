package defaults

import (
	"testing"
	"time"
)

type options struct {
	Name    string
	Count   int
	Timeout time.Duration
	Ratio   float64
	Tags    []string
	Off     bool
	hidden  int
}

func TestZeroFillsOnlyUnsetFieldsThatDefSets(t *testing.T) {
	o := options{Count: -1, Timeout: time.Second, hidden: 7}
	Zero(&o, options{Name: "n", Count: 4, Timeout: time.Minute, Ratio: 0.5, Tags: []string{"a"}})
	if o.Name != "n" || o.Count != -1 || o.Timeout != time.Second || o.Ratio != 0.5 || len(o.Tags) != 1 {
		t.Fatalf("Zero: got %+v", o)
	}
	if o.Off || o.hidden != 7 {
		t.Fatalf("Zero touched a field def leaves zero: %+v", o)
	}
}

func TestNotPositiveAlsoReplacesNegatives(t *testing.T) {
	o := options{Count: -3, Timeout: -time.Second, Ratio: -1, Name: "kept"}
	NotPositive(&o, options{Name: "n", Count: 4, Timeout: time.Minute, Ratio: 0.5})
	if o.Count != 4 || o.Timeout != time.Minute || o.Ratio != 0.5 || o.Name != "kept" {
		t.Fatalf("NotPositive: got %+v", o)
	}
	o = options{Count: 2}
	NotPositive(&o, options{Count: 4})
	if o.Count != 2 {
		t.Fatalf("NotPositive replaced a set positive value: %+v", o)
	}
}

func TestPanicsOnMisuse(t *testing.T) {
	for name, f := range map[string]func(){
		"not a struct": func() { n := 0; Zero(&n, 1) },
		"unexported":   func() { o := options{}; Zero(&o, options{hidden: 1}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
