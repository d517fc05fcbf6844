module attested-cortex.local/kstatus

go 1.24

require sigs.k8s.io/cli-utils v0.37.2
