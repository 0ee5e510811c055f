// The pod sandbox ("pause") process of the local node built by tools/kube-node.sh: nothing can be
// pulled here, so containerd's sandbox_image is this program in an image of one file. It holds the
// pod's namespaces, reaps orphans that land on it (PID 1 of a pod sharing its PID namespace) and
// exits on SIGINT or SIGTERM, as registry.k8s.io/pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
