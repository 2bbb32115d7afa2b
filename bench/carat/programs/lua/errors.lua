-- Errors and the stack: pcall/xpcall/error with values of every type, levels and positions,
-- message handlers, stack overflow in Lua and through C (string.gsub callbacks, metamethods),
-- and errors unwinding through to-be-closed variables and coroutines.

-- Error values of any type pass through unchanged.
for _, v in ipairs({42, "msg", true, 3.5}) do
  local ok, e = pcall(error, v)
  assert(not ok and e == v)
end
local tv = {}
local ok, e = pcall(error, tv); assert(not ok and e == tv)
ok, e = pcall(error); assert(not ok and e == nil)

-- Levels: the position is of the function at that level.
local function lvl1() error("at level 1") end
local function lvl2() error("at level 2", 2) end
local function caller() lvl2() end        -- this line is reported for level 2
ok, e = pcall(lvl1); assert(e:match("errors%.lua:%d+: at level 1$"))
ok, e = pcall(caller)
assert(e:match("errors%.lua:17: at level 2$"))
ok, e = pcall(error, "bare", 0); assert(e == "bare")

-- Runtime errors have messages naming the culprit.
local t = {}
ok, e = pcall(function() return t.x.y end)
assert(e:find("attempt to index a nil value %(field 'x'%)"))
ok, e = pcall(function() local s = "a"; return s + 1 end)
assert(e:find("attempt to add a 'string' with a 'number'"))
ok, e = pcall(function() return 1 // 0 end)
assert(e:find("attempt to divide by zero"))
ok, e = pcall(function() local z = 0; return 5 % z end)
assert(e:find("attempt to perform 'n%%0'"))
ok, e = pcall(function() return {} < {} end)
assert(e:find("attempt to compare two table values"))
ok, e = pcall(function() local undefinedfn; undefinedfn() end)
assert(e:find("attempt to call a nil value %(local 'undefinedfn'%)"))
ok, e = pcall(function() return math.tointeger(2^63) // 1 end)
assert(not ok)
ok, e = pcall(string.rep)
assert(e == "bad argument #1 to 'string.rep' (string expected, got no value)")

-- xpcall with a handler that sees the original error and can build a traceback.
local function handler(m) return {msg = m, tb = debug.traceback("tb", 2)} end
ok, e = xpcall(function() local x = nil; return x.f end, handler)
assert(not ok and e.msg:find("attempt to index") and e.tb:find("stack traceback"))
ok, e = xpcall(function(a, b) return a + b end, handler, 3, 4)
assert(ok and e == 7)
-- An error inside the handler.
ok, e = xpcall(error, function() error("again") end, "first")
assert(not ok)

-- Stack overflow in Lua code is an ordinary error.
local function inf(n) return 1 + inf(n + 1) end
ok, e = pcall(inf, 1)
assert(not ok and e:find("stack overflow"))
-- ... and again after the stack was shrunk back (the state is still usable).
collectgarbage()
ok, e = pcall(inf, 1)
assert(not ok and e:find("stack overflow"))
-- C stack overflow: recursion through a C function (gsub calling back into Lua).
local function viac(n) return (("x"):gsub("x", function() return viac(n + 1) end)) end
ok, e = pcall(viac, 1)
assert(not ok and (e:find("stack overflow") or e:find("C stack overflow")))
-- Recursion through __index metamethods.
local loopy = setmetatable({}, {})
getmetatable(loopy).__index = function(tb, k) return tb[k .. "x"] end
ok, e = pcall(function() return loopy.a end)
assert(not ok)

-- Errors unwinding through many frames with to-be-closed variables, counted.
local closes = 0
local function nest(n)
  local c <close> = setmetatable({}, {__close = function() closes = closes + 1 end})
  if n == 0 then error("deep") end
  return nest(n - 1)
end
ok, e = pcall(nest, 500)
assert(not ok and e:find("deep") and closes == 501)
-- An error in __close replaces the original one.
ok, e = pcall(function()
  local c <close> = setmetatable({}, {__close = function() error("from close", 0) end})
  error("original", 0)
end)
assert(e == "from close")

-- Errors inside coroutines do not kill the caller; wrap propagates them.
local co = coroutine.wrap(function() error({code = 7}) end)
ok, e = pcall(co)
assert(not ok and e.code == 7)

-- Many protected calls in a loop, each with garbage, accumulating a checksum.
local sum = 0
for i = 1, 100000 do
  local okp, v = pcall(function(x)
    if x % 7 == 0 then error(x) end
    return {x}
  end, i)
  if okp then sum = sum + v[1] else sum = sum - v end
end
local sevens = 100000 // 7
assert(sum == 100000 * 100001 // 2 - 2 * 7 * (sevens * (sevens + 1) // 2))

-- load errors carry positions.
local f, le = load("local x = = 1", "=src")
assert(not f and le == "src:1: unexpected symbol near '='")
f, le = load("return 1 +", "=src")
assert(not f and le:find("src:1: unexpected symbol near <eof>"))
f, le = load("x = '\\q'", "=src")
assert(not f and le:find("invalid escape sequence"))
f, le = load("goto nowhere", "=src")
assert(not f and le:find("no visible label 'nowhere'"))
