// Command kube-scheduler is the stock kube-scheduler (every in-tree plugin, every flag) with
// waterline's plugin registered. Enable it in a profile with a KubeSchedulerConfiguration
// (see config/scheduler-config.yaml); profiles that do not enable it behave exactly as
// upstream's.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json, as upstream's binary
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/waterline/waterline/plugin/waterline"
)

func main() {
	command := app.NewSchedulerCommand(
		app.WithPlugin(waterline.Name, waterline.New),
	)
	os.Exit(cli.Run(command))
}
