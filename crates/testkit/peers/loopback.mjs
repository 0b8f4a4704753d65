// Preloaded into Node test peers (`node --import ./loopback.mjs …`): every server they
// start listens on 127.0.0.1 only, and reports the port it got on stderr as
// `agentplane-peer-listening <port>`, so tests can ask for port 0 and read the real one.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if (typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port))) {
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  } else if (port && typeof port === "object" && !("path" in port)) {
    args[0] = { ...port, host: "127.0.0.1" };
  }
  this.once("listening", () => {
    const address = this.address();
    if (address && typeof address === "object") {
      process.stderr.write(`agentplane-peer-listening ${address.port}\n`);
    }
  });
  return listen.apply(this, args);
};
