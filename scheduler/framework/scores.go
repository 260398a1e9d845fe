package framework

// NodeScores is the output of one Score phase: for every scored node the
// normalized score of each plugin (before its weight) and the weighted
// total. The caller owns it and may reuse it across cycles: the runtime
// grows its buffers only when they are too small, so a steady scheduling
// loop scores without allocating.
type NodeScores struct {
	// Plugins are the Score plugins that ran (not skipped), in profile
	// order, and Weights their weights.
	Plugins []string
	Weights []int64
	// Nodes are the nodes scored, in the order given.
	Nodes []*NodeInfo
	// Totals[i] is the weighted total of Nodes[i].
	Totals []int64
	// lists holds one NodeScoreList per plugin, back to back.
	lists []NodeScore
}

// Reset prepares s for plugins x nodes scores, keeping its memory.
func (s *NodeScores) Reset(numPlugins int, nodes []*NodeInfo) {
	n := len(nodes)
	s.Plugins = s.Plugins[:0]
	s.Weights = s.Weights[:0]
	s.Nodes = nodes
	if cap(s.Totals) < n {
		s.Totals = make([]int64, n)
	}
	s.Totals = s.Totals[:n]
	clear(s.Totals)
	if size := numPlugins * n; cap(s.lists) < size {
		s.lists = make([]NodeScore, size)
	} else {
		s.lists = s.lists[:size]
	}
}

// PluginScores returns plugin p's scores for every node, in node order:
// the list NormalizeScore works on.
func (s *NodeScores) PluginScores(p int) NodeScoreList {
	n := len(s.Nodes)
	return s.lists[p*n : (p+1)*n : (p+1)*n]
}

// Score returns plugin p's normalized score of node i, before weight.
func (s *NodeScores) Score(i, p int) int64 { return s.lists[p*len(s.Nodes)+i].Score }

// PluginScore is one plugin's part of a node's score.
type PluginScore struct {
	Plugin string
	// Score is the normalized score in [MinNodeScore, MaxNodeScore].
	Score int64
	// Weighted is Score times the plugin's weight.
	Weighted int64
}

// NodePluginScores returns node i's per-plugin breakdown (allocates; for
// explanations and logs, not the hot path).
func (s *NodeScores) NodePluginScores(i int) []PluginScore {
	out := make([]PluginScore, len(s.Plugins))
	for p := range s.Plugins {
		sc := s.Score(i, p)
		out[p] = PluginScore{Plugin: s.Plugins[p], Score: sc, Weighted: sc * s.Weights[p]}
	}
	return out
}
