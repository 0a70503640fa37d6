// CoreDNS for real nodes (tools/realnode): the stock server with only the plugins the cluster's
// Corefile uses (tools/realnode/dns.py), so the build compiles a small part of the module.
// Plugins register themselves when imported; the server block's order comes from CoreDNS's
// own directive list, whatever the order here.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() {
	coremain.Run()
}
