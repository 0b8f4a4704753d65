-- wrk script: one small streamed chat completion (stream: true). Set AUTH for a bearer token.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Client-ID"] = "bench"
local auth = os.getenv("AUTH")
if auth then wrk.headers["Authorization"] = "Bearer " .. auth end
-- Portkey's gateway is told the upstream per request, in its own headers.
local portkey_host = os.getenv("PORTKEY_HOST")
if portkey_host and portkey_host ~= "" then
  wrk.headers["x-portkey-provider"] = "openai"
  wrk.headers["x-portkey-custom-host"] = portkey_host
end
wrk.body = '{"model":"fake-model","stream":true,"messages":[{"role":"user","content":"hi"}]}'
