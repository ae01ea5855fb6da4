-- wrk script for kb serve's /mcp (scripts/bench-serve.sh): each request a
-- 2026-07-28 tools/call of search (no session, its headers matching the
-- body), so that any connection may send any request:
--   wrk -s tests/bench/serve-mcp.lua URL -- BODIES
-- BODIES holds one set of search arguments (JSON) a line; each connection
-- walks them from its own starting point.
local bodies = {}
local i = 0
local id = 0
local meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
             '"io.modelcontextprotocol/clientCapabilities":{}}'
local headers = {
  ["Content-Type"] = "application/json",
  ["Accept"] = "application/json, text/event-stream",
  ["MCP-Protocol-Version"] = "2026-07-28",
  ["Mcp-Method"] = "tools/call",
  ["Mcp-Name"] = "search",
}

function init(args)
  local f = assert(io.open(args[1], "r"), "cannot open the bodies file")
  for line in f:lines() do
    if #line > 0 then bodies[#bodies + 1] = line end
  end
  f:close()
  assert(#bodies > 0, "no request bodies")
  i = math.random(#bodies)
end

function request()
  i = i % #bodies + 1
  id = id + 1
  local body = '{"jsonrpc":"2.0","id":' .. id .. ',"method":"tools/call","params":' ..
               '{"name":"search","arguments":' .. bodies[i] .. ',' .. meta .. '}}'
  return wrk.format("POST", "/mcp", headers, body)
end
