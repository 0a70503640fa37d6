// Pins the prometheus-operator module whose example/prometheus-operator-crd/ holds the
// ServiceMonitor and PrometheusRule CRDs the install tests validate the chart's objects with
// (tools/deploytools/build.sh copies them next to helm). Nothing is built from it.
module nova.invalid/prometheus-crds

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.90.1
