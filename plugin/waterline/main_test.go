package waterline

import (
	"os"
	"testing"

	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

// TestMain registers kube-scheduler's own metrics, which frameworkruntime.NewFramework
// expects (scheduler.New registers them in a real scheduler), so any single test can run
// on its own.
func TestMain(m *testing.M) {
	schedulermetrics.Register()
	os.Exit(m.Run())
}
