package main

import "github.com/berth-io/berth/scheduler"

func schedulerConfigForBench(bc benchConfig) scheduler.Config {
	return scheduler.Config{Shards: bc.shards}
}
