package bench

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/prunesched/prunesched/internal/testutil"
)

func TestNATSKind(t *testing.T) {
	for _, c := range []struct {
		msg  nats.Msg
		want string
	}{
		{nats.Msg{Subject: "ps.t.s.fact"}, "publish fact"},
		{nats.Msg{Subject: "ps.t.s.mark.3", Reply: "$JS.ACK.PS.elig-3.1.2.3.4.5"}, "delivery"},
		{nats.Msg{Subject: "$JS.ACK.PS.elig-3.1.2.3.4.5", Data: []byte("+ACK")}, "ack"},
		{nats.Msg{Subject: "$JS.ACK.PS.elig-3.1.2.3.4.5", Data: []byte("+ACK"), Reply: "_INBOX.x.y"}, "ack confirmed"},
		{nats.Msg{Subject: "$JS.ACK.PS.elig-3.1.2.3.4.5", Data: []byte("-NAK {}")}, "nak"},
		{nats.Msg{Subject: "$JS.ACK.PS.elig-3.1.2.3.4.5", Data: []byte("+WPI")}, "in-progress"},
		{nats.Msg{Subject: "$O.blobs.C.abc"}, "object publish"},
		{nats.Msg{Subject: "$JS.API.DIRECT.GET.OBJ_blobs.$O.blobs.M.eA=="}, "api object DIRECT.GET"},
		{nats.Msg{Subject: "$JS.API.STREAM.MSG.GET.OBJ_blobs"}, "api object STREAM.MSG"},
		{nats.Msg{Subject: "$JS.API.CONSUMER.INFO.PS.elig-3"}, "api CONSUMER.INFO"},
		{nats.Msg{Subject: "_INBOX.abc.def"}, "reply"},
		{nats.Msg{Subject: "$JS.EVENT.ADVISORY.CONSUMER.CREATED.PS.x"}, "other $JS.EVENT.ADVISORY"},
	} {
		testutil.Equal(t, natsKind(&c.msg), c.want)
	}
	testutil.Equal(t, perRequest(map[string]int{"ack": 10, "delivery": 30}, 10), "delivery 3.00, ack 1.00")
}
