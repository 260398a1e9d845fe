package conformance

// Profiles are the scheduler configurations scenarios run under, as
// KubeSchedulerConfiguration files: kube decodes each with its own
// scheme (defaults applied) and Berth with scheduler/config, so both read
// the very same text. Scenario seed n runs under Profiles[n % len].
// Between them they use every NodeResourcesFit scoring strategy and
// BalancedAllocation over cpu, memory, ephemeral storage and an extended
// resource.
var Profiles = []string{
	// 0: kube's default profile.
	`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
`,
	// 1: bin packing with weighted and extended resources.
	`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: cpu, weight: 2}
        - {name: memory, weight: 1}
        - {name: example.com/gpu, weight: 3}
        - {name: ephemeral-storage, weight: 1}
  - name: NodeResourcesBalancedAllocation
    args:
      resources:
      - {name: cpu, weight: 1}
      - {name: memory, weight: 1}
      - {name: example.com/gpu, weight: 1}
      - {name: ephemeral-storage, weight: 1}
  - name: InterPodAffinity
    args:
      hardPodAffinityWeight: 5
`,
	// 2: a utilization shape, an added node affinity, ignored resources.
	`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      ignoredResources: [example.com/fpga]
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources:
        - {name: cpu, weight: 1}
        - {name: memory, weight: 2}
        - {name: example.com/gpu, weight: 1}
        requestedToCapacityRatio:
          shape:
          - {utilization: 0, score: 2}
          - {utilization: 40, score: 9}
          - {utilization: 100, score: 1}
  - name: NodeResourcesBalancedAllocation
    args:
      resources:
      - {name: cpu, weight: 1}
      - {name: example.com/gpu, weight: 1}
  - name: NodeAffinity
    args:
      addedAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 40
          preference:
            matchExpressions:
            - {key: disk, operator: In, values: [ssd]}
  - name: InterPodAffinity
    args:
      ignorePreferredTermsOfExistingPods: true
`,
	// 3: spreading over weighted resources; extended groups ignored.
	`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      ignoredResourceGroups: [example.com]
      scoringStrategy:
        type: LeastAllocated
        resources:
        - {name: cpu, weight: 3}
        - {name: memory, weight: 1}
        - {name: ephemeral-storage, weight: 2}
  - name: NodeResourcesBalancedAllocation
    args:
      resources:
      - {name: cpu, weight: 1}
      - {name: memory, weight: 1}
      - {name: ephemeral-storage, weight: 1}
`,
}
