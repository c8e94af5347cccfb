package client

import (
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

func TestWithInputFilesKeepsTheOperatorsFiles(t *testing.T) {
	operator := map[string][]byte{"conf.ini": []byte("x=1")}
	got, err := WithInputFiles(operator, map[string]InputFile{"data.csv": InputFile("1,2")})
	if err != nil || string(got["conf.ini"]) != "x=1" || string(got["data.csv"]) != "1,2" {
		t.Errorf("got %q, %v; want both files", got, err)
	}
	if len(operator) != 1 {
		t.Errorf("the operator's map was changed: %q", operator)
	}
	if _, err := WithInputFiles(operator, map[string]InputFile{"conf.ini": InputFile("x=2")}); guard.TypeOf(err) != guard.TypeToolUsageError {
		t.Errorf("replacing the operator's file: %v; want a ToolUsageError", err)
	}
}
