#include "collectives/call_signature.h"

namespace ringtrain::collectives {

CallSignature makeSignature(std::uint64_t sequence, CollectiveKind kind, std::size_t count,
                            DataType type, int reduceOp, int root) {
  CallSignature s;
  s.sequence = static_cast<std::int64_t>(sequence);
  s.kind = static_cast<std::int64_t>(kind);
  s.count = static_cast<std::int64_t>(count);
  s.dataType = static_cast<std::int64_t>(type);
  s.reduceOp = reduceOp;
  s.root = root;
  return s;
}

std::string describe(const CallSignature& s) {
  std::string text;
  switch (static_cast<CollectiveKind>(s.kind)) {
    case CollectiveKind::kAllreduce:
      text = "all-reduce";
      break;
    case CollectiveKind::kBroadcast:
      text = "broadcast";
      break;
    case CollectiveKind::kAllgather:
      text = "all-gather";
      break;
    case CollectiveKind::kReduceScatter:
      text = "reduce-scatter";
      break;
    case CollectiveKind::kGatherShards:
      text = "shard all-gather";
      break;
    default:
      text = "collective kind " + std::to_string(s.kind);
      break;
  }
  text += " #" + std::to_string(s.sequence) + " of " + std::to_string(s.count) + " ";
  if (s.dataType >= 0 && s.dataType < static_cast<std::int64_t>(std::size(kAllDataTypes))) {
    text += name(static_cast<DataType>(s.dataType));
  } else {
    text += "type " + std::to_string(s.dataType);
  }
  if (static_cast<CollectiveKind>(s.kind) == CollectiveKind::kAllgather) text += " per rank";
  if (s.reduceOp >= 0 && s.reduceOp < static_cast<std::int64_t>(std::size(kAllReduceOps))) {
    text += " (" + std::string(name(static_cast<ReduceOp>(s.reduceOp))) + ")";
  }
  if (s.root >= 0) text += " from rank " + std::to_string(s.root);
  return text;
}

std::uint64_t agreementToken(const CallSignature& s) {
  // Each field times its own odd constant, summed, then splitmix64's finaliser: a change in any
  // one field changes the sum (an odd multiplier is invertible mod 2^64) and so the hash (the
  // finaliser is a bijection). The products are independent, so this costs one mix in latency
  // where mixing field after field cost six: it is computed on every collective.
  std::uint64_t h = static_cast<std::uint64_t>(s.sequence) * 0x9e3779b97f4a7c15ull +
                    static_cast<std::uint64_t>(s.kind) * 0xc2b2ae3d27d4eb4full +
                    static_cast<std::uint64_t>(s.count) * 0x165667b19e3779f9ull +
                    static_cast<std::uint64_t>(s.dataType) * 0xd6e8feb86659fd93ull +
                    static_cast<std::uint64_t>(s.reduceOp) * 0xff51afd7ed558ccdull +
                    static_cast<std::uint64_t>(s.root) * 0xc4ceb9fe1a85ec53ull;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == kDisagreement ? 1 : h;
}

std::string disagreementMessage(const std::vector<CallSignature>& signatures) {
  std::size_t other = 1;
  while (other + 1 < signatures.size() && signatures[other] == signatures[0])
    ++other;
  return "ranks disagree on the collective: rank 0 calls " + describe(signatures[0]) + ", rank " +
         std::to_string(other) + " calls " + describe(signatures[other]);
}

}  // namespace ringtrain::collectives
