package answer

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterSCRAMRefusal answers each user of an AlterUserScramCredentials
// (deletions, then upsertions, each user once, as Kafka does): the
// request's lists are Deletions and Upsertions, the response's Results.
// An empty result list would read as success (kadm does).
func AlterSCRAMRefusal(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	resp.Version = req.Version
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		x := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		x.User, x.ErrorCode = user, code
		resp.Results = append(resp.Results, x)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return resp
}

// DescribeLogDirsRefusal: Kafka answers a refused DescribeLogDirs with no
// directories and, from v3, the top-level code. Before v3 that empty answer
// reads as "no directories", so the proxy adds one directory entry, unnamed,
// carrying the code: clients report it as that directory's error.
func DescribeLogDirsRefusal(r kmsg.Request, code int16) kmsg.Response {
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	resp.Version = r.GetVersion()
	resp.ErrorCode = code
	if resp.Version < 3 {
		d := kmsg.NewDescribeLogDirsResponseDir()
		d.ErrorCode = code
		resp.Dirs = append(resp.Dirs, d)
	}
	return resp
}

// AlterReplicaLogDirsRefusal answers each partition of each directory: the
// response lists topics, not directories.
func AlterReplicaLogDirsRefusal(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.AlterReplicaLogDirsRequest)
	resp := kmsg.NewPtrAlterReplicaLogDirsResponse()
	resp.Version = req.Version
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp
}
