package framework

import (
	"errors"
	"fmt"
)

var errTest = errors.New("test error")

func ni(name string) *NodeInfo {
	n := NewNodeInfo()
	n.SetNode(&Node{Name: name})
	return n
}

func names(nodes []*NodeInfo) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Node().Name)
	}
	return out
}

type sliceLister []*NodeInfo

func listerOf(n []*NodeInfo) NodeInfoLister { return sliceLister(n) }

func (l sliceLister) List() []*NodeInfo                                 { return l }
func (l sliceLister) HavePodsWithAffinityList() []*NodeInfo             { return nil }
func (l sliceLister) HavePodsWithRequiredAntiAffinityList() []*NodeInfo { return nil }
func (l sliceLister) Get(name string) (*NodeInfo, error) {
	for _, n := range l {
		if n.Node().Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %s", name)
}
