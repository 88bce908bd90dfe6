// A DNS stand-in for the tests (dns2, UDP on 127.0.0.1): it answers TXT questions from a table
// the test fills, NXDOMAIN for names it does not know. A server started with
// DNS_SERVERS=<stand-in.server> asks it for domain verification records.
import { createUDPServer, Packet } from 'dns2';

export interface DnsStandIn {
  /** `127.0.0.1:<port>`: the value for DNS_SERVERS. */
  server: string;
  /** The TXT records of `name` (each a string); none: the name is unknown (NXDOMAIN). */
  setTxt(name: string, values: string[]): void;
  close(): Promise<void>;
}

export async function startDnsStandIn(): Promise<DnsStandIn> {
  const txt = new Map<string, string[]>();
  const server = createUDPServer((request, send) => {
    const response = Packet.createResponseFromRequest(request);
    const [question] = request.questions;
    const values = question ? txt.get(question.name.toLowerCase()) : undefined;
    if (!values?.length) response.header.rcode = Packet.RCODE.NXDOMAIN;
    else if (question!.type === Packet.TYPE.TXT) {
      for (const data of values) response.answers.push({ name: question!.name, type: Packet.TYPE.TXT, class: Packet.CLASS.IN, ttl: 1, data } as never);
    }
    void send(response);
  });
  await server.listen(0, '127.0.0.1');
  return {
    server: `127.0.0.1:${server.address().port}`,
    setTxt: (name, values) => void txt.set(name.toLowerCase(), values),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
