package store

import (
	"crypto/rand"
	"crypto/sha256"

	"github.com/google/uuid"
)

// Uids Berth assigns are bound to the pod's key by their own bits, so they
// need no uid index key (keys.uids): a create with one is unique because
// the pod key's create compare is. That halves the keys a create writes and
// the entries etcd's key index rebuilds when it opens.
//
// An assigned uid is a UUID of version 8 (RFC 9562, custom bits), written
// in its canonical lowercase text form:
//
//	bits   0..47   random
//	bits  48..51   version 8
//	bits  52..63   tag (12 bits)
//	bits  64..65   variant 0b10
//	bits  66..127  tag (62 bits)
//
// The 74-bit tag is the start of SHA-256(uidTagDomain, random, namespace,
// "/", name). A pod key whose tag does not match cannot carry the uid; a
// client looking for one uid valid for two pod keys must search about 2^37
// hashes, and would only make two of its own pods share a uid. The random
// part tells apart pods that reuse one name: 48 bits, so two incarnations
// of a name get the same uid with odds of 2^-48.
//
// Any uid in the 36-character form with version 8 and variant 0b10 (hex
// digits of either case, as RFC 9562 compares UUIDs without case) is taken
// to be Berth's: only the pod it was made for may carry it. Every other uid
// a client chooses is claimed through the index, as before.

// uidTagDomain keeps the tag apart from any other use of SHA-256 on the same
// strings; the version in it lets a later scheme coexist.
const uidTagDomain = "berth pod uid v1\x00"

// uidRandomBytes is the length of an assigned uid's random part, bytes 0..5.
const uidRandomBytes = 6

// uidClass is how a create treats a pod's uid.
type uidClass int

const (
	// uidIndexed is a uid in no form of Berth's: it is claimed through the
	// uid index key, in the same Txn as the pod.
	uidIndexed uidClass = iota
	// uidBound is a uid Berth assigned to this very pod key: no index key.
	uidBound
	// uidBoundElsewhere is in Berth's form but not for this pod key: it was
	// assigned to another pod (or a client made it up), so it is refused.
	uidBoundElsewhere
)

// assignUID returns a new uid for the pod namespace/name, of Berth's form.
func assignUID(namespace, name string) string {
	var u uuid.UUID
	rand.Read(u[:uidRandomBytes]) // never fails (crypto/rand, Go 1.24+)
	tag := uidTag(u[:uidRandomBytes], namespace, name)
	u[6] = 0x80 | tag[0]&0x0f // version 8
	u[7] = tag[1]
	u[8] = 0x80 | tag[2]&0x3f // variant 0b10
	copy(u[9:], tag[3:10])
	return u.String()
}

// classifyUID tells how a create of namespace/name treats uid.
func classifyUID(uid, namespace, name string) uidClass {
	// uuid.Parse also takes the urn, braced and bare-hex spellings: those
	// are a client's own strings, claimed through the index.
	if len(uid) != 36 {
		return uidIndexed
	}
	u, err := uuid.Parse(uid)
	if err != nil || u.Version() != 8 || u.Variant() != uuid.RFC4122 {
		return uidIndexed
	}
	tag := uidTag(u[:uidRandomBytes], namespace, name)
	if u[6]&0x0f != tag[0]&0x0f || u[7] != tag[1] || u[8]&0x3f != tag[2]&0x3f || string(u[9:]) != string(tag[3:10]) {
		return uidBoundElsewhere
	}
	return uidBound
}

func uidTag(random []byte, namespace, name string) [sha256.Size]byte {
	var buf [128]byte // most keys fit: no allocation
	b := append(buf[:0], uidTagDomain...)
	b = append(b, random...)
	b = append(b, namespace...)
	b = append(b, '/')
	b = append(b, name...)
	return sha256.Sum256(b)
}
