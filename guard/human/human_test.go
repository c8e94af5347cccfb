package human

import (
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 10 << 20: "10 MiB", 3<<20 + 1<<19: "3.5 MiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q; want %q", n, got, want)
		}
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "over", 45 * time.Second: "45s", 12 * time.Minute: "12m",
		3*time.Hour + 5*time.Minute: "3h 5m", 52 * time.Hour: "2d 4h",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%s) = %q; want %q", d, got, want)
		}
	}
}

func TestLimitsAndNetwork(t *testing.T) {
	l := Limits(guard.Limits{Timeout: 30 * time.Second, MaxStdoutBytes: 1 << 20, MaxStderrBytes: 512, MaxFiles: 16, MaxFileBytes: 10 << 20, MaxTotalFileBytes: 50 << 20})
	want := []Field{{"timeout", "30s"}, {"stdout", "1 MiB"}, {"stderr", "512 B"}, {"output files", "16, 10 MiB each, 50 MiB in all"}}
	for i := range want {
		if l[i] != want[i] {
			t.Errorf("Limits[%d] = %v; want %v", i, l[i], want[i])
		}
	}
	for want, s := range map[string]guard.Summary{
		"none": {}, "open network": {Network: true}, "egress: 2 host patterns": {Egress: []string{"a.example", "b.example"}},
	} {
		if got := Network(s); got != want {
			t.Errorf("Network(%+v) = %q; want %q", s, got, want)
		}
	}
}
