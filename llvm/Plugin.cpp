// Registration of the exomem CARAT pass with clang's new pass manager, its options, and the
// per-module statistics it prints (the paper's Table 1 comes from these).
//
// Use: clang -fpass-plugin=libexomem-carat.so -Xclang -load -Xclang libexomem-carat.so
//      [-mllvm -carat-guards] ...   (tools/exomem-cc adds all of this)
#include "Carat.h"

#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace llvm;
using namespace exomem_carat;

static cl::opt<bool> OptTrack("carat-track", cl::init(true),
                              cl::desc("exomem CARAT: track allocations and frees"));
static cl::opt<bool> OptEscapes("carat-escapes", cl::init(true),
                                cl::desc("exomem CARAT: track pointer escapes"));
static cl::opt<bool> OptGuards("carat-guards", cl::init(false),
                               cl::desc("exomem CARAT: guard loads, stores and calls"));
static cl::opt<std::string>
    OptGuardOpt("carat-guard-opt", cl::init("all"),
                cl::desc("exomem CARAT: guard optimisations: all, none, or a comma list of "
                         "value-range,redundant,hoist,merge,coalesce,version"));
static cl::opt<bool> OptVas("carat-vas", cl::init(false),
                            cl::desc("exomem CARAT: SpaceJMP VAS-safety checks"));
static cl::opt<std::string>
    OptStats("carat-stats", cl::init(""),
             cl::desc("exomem CARAT: append per-module counts as JSON lines to this file "
                      "('-' for stderr)"));

bool exomem_carat::isRuntimeFunction(const Function &F) {
  StringRef N = F.getName();
  return N.starts_with("exo_carat_") || N.starts_with("exomem.carat.");
}

GlobalVariable *exomem_carat::runtimeGlobal(Module &M, StringRef Name, Type *Ty) {
  GlobalVariable *G = M.getGlobalVariable(Name);
  if (!G)
    G = new GlobalVariable(M, Ty, false, GlobalValue::ExternalLinkage, nullptr, Name);
  if (M.getPIELevel() != PIELevel::Default || M.getPICLevel() == PICLevel::NotPIC)
    G->setDSOLocal(true);
  return G;
}

Constant *exomem_carat::siteString(Module &M, const Instruction &I) {
  std::string S;
  if (const DebugLoc &DL = I.getDebugLoc()) {
    S = (DL->getFilename() + ":" + Twine(DL.getLine())).str();
  } else {
    S = I.getFunction()->getName().str();
  }
  IRBuilder<> B(M.getContext());
  static thread_local std::map<std::pair<Module *, std::string>, Constant *> Cache;
  auto Key = std::make_pair(&M, S);
  auto It = Cache.find(Key);
  if (It != Cache.end())
    return It->second;
  GlobalVariable *G = new GlobalVariable(
      M, ArrayType::get(B.getInt8Ty(), S.size() + 1), true, GlobalValue::PrivateLinkage,
      ConstantDataArray::getString(M.getContext(), S), "exomem.carat.site");
  G->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
  return Cache[Key] = G;
}

static GuardOptions parseGuardOpt(StringRef S) {
  GuardOptions O;
  if (S == "all")
    return O;
  O.ValueRange = O.Redundant = O.Hoist = O.Merge = O.Coalesce = O.Version = false;
  SmallVector<StringRef, 4> Parts;
  S.split(Parts, ',', -1, false);
  for (StringRef P : Parts) {
    if (P == "value-range")
      O.ValueRange = true;
    else if (P == "redundant")
      O.Redundant = true;
    else if (P == "hoist")
      O.Hoist = true;
    else if (P == "merge")
      O.Merge = true;
    else if (P == "coalesce")
      O.Coalesce = true;
    else if (P == "version")
      O.Version = true;
    else if (P != "none")
      errs() << "exomem carat: unknown -carat-guard-opt part '" << P << "' (ignored)\n";
  }
  return O;
}

static void writeStats(Module &M, const TrackCounts &T, const GuardCounts &G,
                       const VasCounts &V) {
  if (OptStats.empty())
    return;
  std::string Line;
  raw_string_ostream OS(Line);
  OS << "{\"module\":\"" << M.getSourceFileName() << "\",\"track\":" << (OptTrack ? 1 : 0)
     << ",\"escapes\":" << (OptEscapes ? 1 : 0) << ",\"guards\":" << (OptGuards ? 1 : 0)
     << ",\"guard_opt\":\"" << OptGuardOpt << "\""
     << ",\"allocs\":" << T.Allocs << ",\"frees\":" << T.Frees
     << ",\"stack_objects\":" << T.StackObjects << ",\"globals\":" << T.Globals
     << ",\"escape_sites\":" << T.Escapes << ",\"copy_sites\":" << T.Copies
     << ",\"pin_sites\":" << T.Pins
     << ",\"guard_loads\":" << G.Loads << ",\"guard_stores\":" << G.Stores
     << ",\"guard_calls\":" << G.Calls << ",\"guard_ranges\":" << G.Ranges
     << ",\"guards_naive\":" << G.naive() << ",\"opt_value_range\":" << G.ValueRange
     << ",\"opt_redundant\":" << G.Redundant << ",\"opt_hoisted\":" << G.Hoisted
     << ",\"opt_merged\":" << G.Merged << ",\"opt_coalesced\":" << G.Coalesced
     << ",\"opt_versioned\":" << G.Versioned << ",\"versioned_loops\":" << G.VersionedLoops
     << ",\"versioned_functions\":" << G.VersionedFunctions
     << ",\"guards_final\":" << G.Final
     << ",\"vas_derefs\":" << V.Derefs << ",\"vas_safe\":" << V.ProvenSafe
     << ",\"vas_checked\":" << V.Checked << ",\"vas_unsafe\":" << V.Unsafe << "}\n";
  OS.flush();
  if (OptStats == "-") {
    errs() << Line;
    return;
  }
  std::error_code EC;
  raw_fd_ostream F(OptStats, EC, sys::fs::OF_Append | sys::fs::OF_Text);
  if (EC) {
    errs() << "exomem carat: cannot write " << OptStats << ": " << EC.message() << "\n";
    return;
  }
  F << Line;
}

// Code whose blocks may move keeps its loops' addresses in their blocks. Loop strength
// reduction (in the code generator, after this pass) rewrites a loop's addresses as a
// register that runs with the loop plus an offset, and that register may lie anywhere:
// bzip2's fallbackQSort3, walking fmap down from hi, keeps fmap - 4 * (hi - unHi) in one
// register and 4 * hi in another. A move patches words that point into a block, or near
// it (docs/carat.md); such a base, megabytes below, is neither, so after a move the loop
// went on swapping elements of the old block (one compression of bzip2's sample3 in 13
// came out wrong at 10,000 moves a second). Without the pass, a loop indexes from the
// block's own address. Set here, once, for the compilation this plugin runs in: the code
// generator reads it when it builds its passes. One given on the command line
// (-mllvm -disable-lsr=false, to measure what the pass is worth) is left as it is.
static void keepLoopAddressesInBlocks() {
  static bool Done;
  if (Done)
    return;
  Done = true;
  auto &Opts = cl::getRegisteredOptions();
  auto It = Opts.find("disable-lsr");
  if (It != Opts.end() && It->second->getNumOccurrences())
    return;
  if (It == Opts.end() || It->second->addOccurrence(0, "disable-lsr", "true"))
    errs() << "exomem carat: cannot turn loop strength reduction off: loops may keep "
              "addresses a move cannot patch\n";
}

namespace {
struct CaratPass : PassInfoMixin<CaratPass> {
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &MAM) {
    TrackCounts T;
    GuardCounts G;
    VasCounts V;
    bool Changed = false;
    // VAS safety first: it reasons about the program's own pointers, before our calls.
    if (OptVas)
      Changed |= vasSafetyModule(M, MAM, V);
    // Guards before tracking, so the runtime calls tracking adds are not guarded.
    if (OptGuards)
      Changed |= guardModule(M, MAM, parseGuardOpt(OptGuardOpt), G);
    if (OptTrack || OptEscapes) {
      keepLoopAddressesInBlocks();
      Changed |= trackModule(M, MAM, OptTrack, OptEscapes, T);
    }
    writeStats(M, T, G, V);
    return Changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
  static bool isRequired() { return true; } // run at -O0 too
};
} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "exomem-carat", "0.1", [](PassBuilder &PB) {
            PB.registerOptimizerLastEPCallback(
                [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(CaratPass()); });
          }};
}
