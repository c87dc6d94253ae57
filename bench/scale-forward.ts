// Inside one of the scale bench's computers (a network namespace): its loopback PostgreSQL port,
// carried over the namespace's veth pair to the bench's forwarder (test/netns/net.ts), as every
// OpenComms process there reaches the server.   node --import tsx scale-forward.ts <gateway>
import { FORWARD_PORT, INNER_PORT, forwardLoopback } from '../test/netns/net.ts';

await forwardLoopback(INNER_PORT, process.argv[2]!, FORWARD_PORT);
process.stdout.write('ready\n');
