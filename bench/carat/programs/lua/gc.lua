-- The garbage collector: full collections, steps, incremental and generational modes,
-- stop/restart, weak tables (keys, values, both; ephemerons), finalizers (order,
-- resurrection, __gc set late), and memory returning after big structures die.

local function kb() return collectgarbage("count") end

-- Memory grows with a big structure and comes back when it dies.
collectgarbage()
local before = kb()
local big = {}
for i = 1, 200000 do big[i] = {i, tostring(i)} end
local during = kb()
assert(during > before + 10000)          -- at least 10 MB of tables and strings
big = nil
collectgarbage()
collectgarbage()                         -- the string table halves once per cycle
assert(kb() < before + 1000)

-- Modes: switching returns the previous one; both modes collect. The standalone
-- interpreter starts in generational mode (lua.c).
assert(collectgarbage("incremental") == "generational")
assert(collectgarbage("generational") == "incremental")
local function churn(n)
  local keep = {}
  local sum = 0
  for i = 1, n do
    local t = {i, i * 2, s = "v" .. i}
    sum = sum + t[2]
    if i % 100 == 0 then keep[#keep + 1] = t end   -- a few old objects survive
  end
  for _, t in ipairs(keep) do sum = sum - t[1] end
  return sum, #keep
end
local s, kept = churn(300000)
assert(s == 300000 * 300001 - 100 * (3000 * 3001 // 2) and kept == 3000)
assert(collectgarbage("incremental") == "generational")
collectgarbage("incremental", 150, 200, 13)   -- pause, step multiplier, step size
s, kept = churn(300000)
assert(s == 300000 * 300001 - 100 * (3000 * 3001 // 2))

-- stop / isrunning / restart; step runs a cycle to its end eventually.
collectgarbage("stop")
assert(not collectgarbage("isrunning"))
local m0 = kb()
for i = 1, 50000 do local _ = {i} end
assert(kb() > m0 + 1000)                 -- nothing collected while stopped
collectgarbage("restart")
assert(collectgarbage("isrunning"))
local finished = false
for _ = 1, 100000 do
  if collectgarbage("step", 0) then finished = true; break end
end
assert(finished)

-- Weak values: cached objects disappear when nothing else holds them.
local cache = setmetatable({}, {__mode = "v"})
local strong = {}
for i = 1, 1000 do
  local o = {id = i}
  cache[i] = o
  if i % 10 == 0 then strong[#strong + 1] = o end
end
collectgarbage()
local n = 0
for k, v in pairs(cache) do assert(v.id == k and k % 10 == 0); n = n + 1 end
assert(n == 100)
-- Strings and numbers are values, never removed from weak tables.
local wv = setmetatable({}, {__mode = "v"})
wv[1] = "a string" .. 1; wv[2] = 42; wv[3] = {}
collectgarbage()
assert(wv[1] == "a string1" and wv[2] == 42 and wv[3] == nil)

-- Weak keys: an ephemeron table whose values refer to their own keys.
local eph = setmetatable({}, {__mode = "k"})
local live = {}
for i = 1, 1000 do
  local k = {i}
  eph[k] = {back = k, val = i}              -- value refers to key: still collectable
  if i % 4 == 0 then live[#live + 1] = k end
end
collectgarbage()
n = 0
local vs = 0
for k, v in pairs(eph) do assert(v.back == k); n = n + 1; vs = vs + v.val end
assert(n == 250 and vs == 4 * (250 * 251 // 2))
-- A chain of ephemerons: k1 -> k2 -> ... only reachable through the table.
local chain = setmetatable({}, {__mode = "k"})
local head = {}
local cur = head
for _ = 1, 100 do local nxt = {}; chain[cur] = nxt; cur = nxt end
collectgarbage()
n = 0
for _ in pairs(chain) do n = n + 1 end
assert(n == 100)                           -- all reachable from head
head = nil
collectgarbage()
assert(next(chain) == nil)
-- Fully weak table.
local kv = setmetatable({}, {__mode = "kv"})
for i = 1, 100 do kv[{}] = {} end
kv[1] = {}; kv.x = 1
collectgarbage()
assert(kv.x == 1 and kv[1] == nil)
n = 0
for _ in pairs(kv) do n = n + 1 end
assert(n == 1)

-- Finalizers: each runs exactly once.
local order = {}
do
  for i = 1, 10 do
    setmetatable({}, {__gc = function() order[#order + 1] = i end})
  end
end
collectgarbage()
assert(#order == 10)
table.sort(order)
for i = 1, 10 do assert(order[i] == i) end

-- Resurrection: a finalizer stores its object; it lives on, its finalizer not run again.
local saved
local resurrected = 0
do
  local obj = setmetatable({payload = "still here"}, {__gc = function(o)
    resurrected = resurrected + 1
    saved = o
  end})
end
collectgarbage()
assert(resurrected == 1 and saved.payload == "still here")
saved = nil
collectgarbage(); collectgarbage()
assert(resurrected == 1)

-- __gc set after setmetatable is ignored; set before, it counts.
local ran = {}
local mt1 = {}
setmetatable({}, mt1)
mt1.__gc = function() ran.late = true end
local mt2 = {__gc = true}
setmetatable({}, mt2)
mt2.__gc = function() ran.early = true end
collectgarbage()
assert(ran.early and not ran.late)

-- Finalizers that allocate, and errors in finalizers become warnings, not failures.
local allocated = 0
for i = 1, 200 do
  setmetatable({}, {__gc = function()
    local t = {}
    for j = 1, 50 do t[j] = ("%d-%d"):format(i, j) end
    allocated = allocated + #t
  end})
end
collectgarbage()
assert(allocated == 200 * 50)
setmetatable({}, {__gc = function() error("in finalizer") end})
collectgarbage()                        -- must not raise

-- Finalizers of userdata-like objects closing over resources, under generational mode.
collectgarbage("generational")
local closedn = 0
local function resource(i)
  return setmetatable({i = i}, {__gc = function(r) closedn = closedn + r.i end})
end
local held = {}
for i = 1, 5000 do
  local r = resource(i)
  if i % 2 == 0 then held[#held + 1] = r end
end
collectgarbage()
assert(closedn == 2500 * 2500)           -- the odd ones: sum of first 2500 odd numbers
held = nil
collectgarbage()
assert(closedn == 5000 * 5001 // 2)
collectgarbage("incremental")

-- Strings under collection: many distinct short strings created and dropped, the
-- string table shrinks back; interned strings still compare equal afterwards.
local strs = {}
for i = 1, 100000 do strs[i] = "s" .. i end
for i = 1, 100000 do strs[i] = nil end
collectgarbage()
local same = "s" .. 99999
assert(same == "s99999")

-- Weak table used as a memo cache across collections, checked against direct values.
local memo = setmetatable({}, {__mode = "v"})
local function boxed(i)
  local v = memo[i]
  if not v then v = {i * i}; memo[i] = v end
  return v
end
local total = 0
for round = 1, 5 do
  for i = 1, 2000 do total = total + boxed(i)[1] end
  collectgarbage("step", 10)
end
assert(total == 5 * (2000 * 2001 * 4001 // 6))
