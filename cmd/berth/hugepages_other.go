//go:build !linux

package main

import "go.uber.org/zap"

// adviseHugePages does nothing where transparent huge pages are not
// Linux's.
func adviseHugePages(bool, string, *zap.Logger) bool { return false }
