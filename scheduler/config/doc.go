// Package config reads Berth's scheduler configuration: a YAML file shaped
// like kube-scheduler's KubeSchedulerConfiguration (v1), so existing
// configurations load unchanged where Berth has the same plugins.
//
// What it does, as kube-scheduler does:
//   - apiVersion (kubescheduler.config.k8s.io/v1) and kind
//     (KubeSchedulerConfiguration) are checked when present and may be left
//     out.
//   - No profiles means one default profile named default-scheduler; a
//     lone profile without a name gets that name; otherwise every profile
//     needs a unique name.
//   - Each profile starts from runtime.DefaultProfile. At each extension
//     point (and multiPoint), disabled plugins leave the defaults and "*"
//     disables them all; an enabled plugin that is a default replaces it in
//     place (with its weight), other enabled plugins follow the defaults.
//     A plugin disabled at a point is also left out when multiPoint
//     expands into that point.
//   - Score weights are 0..100; 0 or none means 1.
//   - percentageOfNodesToScore, scheduler-wide or per profile, is 0..100.
//   - pluginConfig args decode into each plugin's own args type
//     (noderesources.FitArgs, balancedallocation.Args, nodeaffinity.Args,
//     podtopologyspread.Args, interpodaffinity.Args,
//     defaultpreemption.Args) and are checked as kube's validation does.
//   - Every profile is then built with runtime.NewFramework against an
//     empty snapshot, so anything a plugin rejects is reported at load time,
//     and all profiles must share one queue sort.
//
// Decoding is strict: unknown fields, unknown plugins, wrong types and
// bad values are errors, each with its line and field path, for example
//
//	config.yaml:14: profiles[0].pluginConfig[0].args.scoringStrategy.type: unknown type "Most" (want LeastAllocated, MostAllocated or RequestedToCapacityRatio)
//
// Kube-scheduler fields Berth does not use (leaderElection,
// clientConnection, parallelism, backoff seconds, extenders) are errors
// too: Berth sets those things elsewhere.
//
// An example (testdata/example.yaml, loaded by the tests):
//
//	apiVersion: kubescheduler.config.k8s.io/v1
//	kind: KubeSchedulerConfiguration
//	# Look for feasible nodes in half of the cluster before scoring
//	# (0, or leaving it out, is kube's adaptive rule).
//	percentageOfNodesToScore: 50
//	profiles:
//	# Pods with no scheduler name: kube's defaults, but bin packing, and only
//	# on nodes labelled pool=general.
//	- schedulerName: default-scheduler
//	  pluginConfig:
//	  - name: NodeResourcesFit
//	    args:
//	      scoringStrategy:
//	        type: MostAllocated
//	        resources:
//	        - {name: cpu, weight: 2}
//	        - {name: memory, weight: 1}
//	  - name: NodeAffinity
//	    args:
//	      addedAffinity:
//	        requiredDuringSchedulingIgnoredDuringExecution:
//	          nodeSelectorTerms:
//	          - matchExpressions:
//	            - {key: pool, operator: In, values: [general]}
//	  # Spread pods that set no constraints of their own across zones.
//	  - name: PodTopologySpread
//	    args:
//	      defaultingType: List
//	      defaultConstraints:
//	      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
//	  - name: InterPodAffinity
//	    args:
//	      hardPodAffinityWeight: 5
//	# Batch pods: scored by resource fit alone, through a custom shape, and
//	# placed after looking at 30% of the nodes.
//	- schedulerName: batch
//	  percentageOfNodesToScore: 30
//	  plugins:
//	    score:
//	      disabled:
//	      - name: "*"
//	      enabled:
//	      - name: NodeResourcesFit
//	        weight: 5
//	  pluginConfig:
//	  - name: NodeResourcesFit
//	    args:
//	      scoringStrategy:
//	        type: RequestedToCapacityRatio
//	        resources:
//	        - {name: cpu, weight: 1}
//	        requestedToCapacityRatio:
//	          shape:
//	          - {utilization: 0, score: 0}
//	          - {utilization: 100, score: 10}
package config
