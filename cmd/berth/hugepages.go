package main

// hugePagesUsage documents --transparent-huge-pages (see hugeheap).
const hugePagesUsage = "on Linux with transparent huge pages in madvise mode, map the Go heap ahead at start and ask the kernel " +
	"to back it with huge pages (MADV_HUGEPAGE), as their always mode would: fewer page faults, a faster restart. " +
	"No effect under always or never, or with GODEBUG=disablethp=1"
