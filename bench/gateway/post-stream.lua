-- wrk script: one small streamed chat completion (stream: true). Set AUTH for a bearer token.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Client-ID"] = "bench"
local auth = os.getenv("AUTH")
if auth then wrk.headers["Authorization"] = "Bearer " .. auth end
wrk.body = '{"model":"fake-model","stream":true,"messages":[{"role":"user","content":"hi"}]}'
