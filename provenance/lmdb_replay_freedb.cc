// The Writer model (lmdb_replay_writer.h): the free database (records of
// freed page numbers by txnid), its rebalancing, and mdb_freelist_save.
#include "provenance/lmdb_replay_writer.h"

#include <algorithm>
#include <functional>
#include <iterator>

namespace dlfs::provenance::lmdb::replay_model {

Status Writer::put_free(uint64_t key, uint32_t dsize) {
  bool exact = false;
  Cursor mc;
  DLFS_RETURN_IF_ERROR(position(free_, key, false, &mc, &exact));
  FreeRec& rec = free_recs_[key];
  if (exact) {
    Page& leaf = page(mc.pg[mc.top]);
    Node& nd = leaf.nodes[mc.ki[mc.top]];
    if (nd.big) {
      const bool dirty = rec.ov_txn == txnid_;
      if (rec.ov_pages >= ovpages(dsize) && dirty) {
        nd.dsize = dsize;
        rec.dsize = dsize;
        return Status::ok();
      }
      ovpage_free(free_, nd.ref, rec.ov_pages, dirty);
      rec.ov_pages = 0;
    } else if (nd.dsize == dsize) {
      return Status::ok();
    }
    node_del(leaf, mc.ki[mc.top]);
    free_.entries--;  // insert() counts it again
  }
  rec.dsize = dsize;
  return insert(mc, Item{key, 8, dsize, false, 0}, false);
}

Status Writer::del_first_free() {
  Cursor mc;
  mc.db = &free_;
  int64_t s = free_.root;
  if (s < 0) return internal("deleting from an empty free database");
  for (int lvl = 0;; ++lvl) {
    if (lvl >= kCursorStack) return internal("tree deeper than liblmdb's cursor stack");
    mc.pg[lvl] = s;
    mc.ki[lvl] = 0;
    mc.snum = lvl + 1;
    mc.top = lvl;
    const Page& p = page(s);
    if (p.leaf) break;
    s = static_cast<int64_t>(p.nodes[0].ref);
  }
  touch_path(mc);
  Page& leaf = page(mc.pg[mc.top]);
  const Node nd = leaf.nodes[0];
  auto it = free_recs_.find(nd.key);
  if (it == free_recs_.end()) return internal("free record without content");
  if (nd.big) ovpage_free(free_, nd.ref, it->second.ov_pages, it->second.ov_txn == txnid_);
  free_recs_.erase(it);
  node_del(leaf, 0);
  free_.entries--;
  return rebalance(mc);
}

Status Writer::rebalance(Cursor& mc) {
  Db& db = *mc.db;
  Page& mp = page(mc.pg[mc.top]);
  const uint32_t minkeys = mp.leaf ? 1 : 2;
  const uint32_t thresh = mp.leaf ? kFillThreshold : 1;
  if (fill(mp) >= thresh && mp.nodes.size() >= minkeys) return Status::ok();

  if (mc.snum < 2) {
    if (mp.nodes.empty()) {
      free_pgs_.push_back(mp.pgno);
      release(mc.pg[0]);
      db.root = -1;
      db.depth = 0;
      db.leaf_pages = 0;
      mc.snum = 0;
    } else if (!mp.leaf && mp.nodes.size() == 1) {
      free_pgs_.push_back(mp.pgno);
      const int64_t child = static_cast<int64_t>(mp.nodes[0].ref);
      release(mc.pg[0]);
      db.root = child;
      db.depth--;
      db.branch_pages--;
      for (int i = 0; i + 1 < mc.snum; ++i) {
        mc.pg[i] = mc.pg[i + 1];
        mc.ki[i] = mc.ki[i + 1];
      }
      mc.snum--;
      mc.top = mc.snum - 1;
    }
    return Status::ok();
  }

  const int ptop = mc.top - 1;
  const Page& parent = page(mc.pg[ptop]);
  if (parent.nodes.size() < 2) return internal("branch page with fewer than two children");
  Cursor mn = mc;
  bool fromleft;
  if (mc.ki[ptop] == 0) {
    mn.ki[ptop]++;
    mn.pg[mn.top] = static_cast<int64_t>(parent.nodes[mn.ki[ptop]].ref);
    mn.ki[mn.top] = 0;
    mc.ki[mc.top] = static_cast<int>(page(mc.pg[mc.top]).nodes.size());
    fromleft = false;
  } else {
    mn.ki[ptop]--;
    mn.pg[mn.top] = static_cast<int64_t>(parent.nodes[mn.ki[ptop]].ref);
    mn.ki[mn.top] = static_cast<int>(page(mn.pg[mn.top]).nodes.size()) - 1;
    mc.ki[mc.top] = 0;
    fromleft = true;
  }
  const Page& np = page(mn.pg[mn.top]);
  if (fill(np) >= thresh && np.nodes.size() > minkeys) return node_move(mn, mc, fromleft);
  if (!fromleft) return page_merge(mn, mc);
  mn.ki[mn.top] += mc.ki[mn.top] + 1;
  return page_merge(mc, mn);
}

Status Writer::node_move(Cursor& csrc, Cursor& cdst, bool /*fromleft*/) {
  touch(csrc, csrc.top);
  touch(cdst, cdst.top);
  Db& db = *csrc.db;
  Page& sp = page(csrc.pg[csrc.top]);
  Page& dp = page(cdst.pg[cdst.top]);
  const int sidx = csrc.ki[csrc.top];
  Item it = item_of(sp.nodes[sidx]);
  if (sidx == 0 && !sp.leaf) {
    const Node& low = lowest_below(static_cast<int64_t>(sp.nodes[0].ref));
    it.key = low.key;
    it.ksize = low.ksize;
  }
  if (!dp.leaf && cdst.ki[cdst.top] == 0) {
    const Node& low = lowest_below(static_cast<int64_t>(dp.nodes[0].ref));
    DLFS_RETURN_IF_ERROR(update_key(dp, 0, low.key, low.ksize));
  }
  DLFS_RETURN_IF_ERROR(node_add(db, dp, cdst.ki[cdst.top], it));
  node_del(sp, sidx);
  for (Cursor* c : {&csrc, &cdst}) {
    Page& p = page(c->pg[c->top]);
    if (c->ki[c->top] != 0) continue;
    if (c->ki[c->top - 1] != 0) {
      DLFS_RETURN_IF_ERROR(update_key(page(c->pg[c->top - 1]), c->ki[c->top - 1], p.nodes[0].key, p.nodes[0].ksize));
    }
    if (!p.leaf) DLFS_RETURN_IF_ERROR(update_key(p, 0, p.nodes[0].key, 0));
  }
  return Status::ok();
}

Status Writer::page_merge(Cursor& csrc, Cursor& cdst) {
  touch(cdst, cdst.top);
  Db& db = *csrc.db;
  Page& ps = page(csrc.pg[csrc.top]);
  Page& pd = page(cdst.pg[cdst.top]);
  int j = static_cast<int>(pd.nodes.size());
  for (size_t i = 0; i < ps.nodes.size(); ++i, ++j) {
    Item it = item_of(ps.nodes[i]);
    if (i == 0 && !ps.leaf) {
      const Node& low = lowest_below(static_cast<int64_t>(ps.nodes[0].ref));
      it.key = low.key;
      it.ksize = low.ksize;
    }
    DLFS_RETURN_IF_ERROR(node_add(db, pd, j, it));
  }
  Page& parent = page(csrc.pg[csrc.top - 1]);
  node_del(parent, csrc.ki[csrc.top - 1]);
  if (csrc.ki[csrc.top - 1] == 0) DLFS_RETURN_IF_ERROR(update_key(parent, 0, parent.nodes[0].key, 0));
  free_pgs_.push_back(ps.pgno);
  (ps.leaf ? db.leaf_pages : db.branch_pages)--;
  release(csrc.pg[csrc.top]);
  cdst.snum--;
  cdst.top--;
  return rebalance(cdst);
}

Status Writer::freelist_save() {
  Cursor scratch;
  if (mop_exists_) DLFS_RETURN_IF_ERROR(search_edge(free_, false, &scratch));
  uint64_t pglast = 0, head_id = 0;
  size_t freecnt = 0;
  int64_t head_room = 0, total_room = 0;
  int more = 1;
  const int64_t maxfree = maxfree_1pg_;
  int64_t mop_len = 0;
  for (;;) {
    while (pglast < pglast_) {
      if (free_recs_.empty()) return internal("consumed free records missing");
      pglast = head_id = free_recs_.begin()->first;
      total_room = head_room = 0;
      DLFS_RETURN_IF_ERROR(del_first_free());
    }
    if (freecnt < free_pgs_.size()) {
      if (freecnt == 0) DLFS_RETURN_IF_ERROR(search_edge(free_, true, &scratch));
      do {
        freecnt = free_pgs_.size();
        DLFS_RETURN_IF_ERROR(put_free(txnid_, static_cast<uint32_t>((freecnt + 1) * 8)));
      } while (freecnt < free_pgs_.size());
      std::vector<uint64_t> ids = free_pgs_;
      std::sort(ids.begin(), ids.end(), std::greater<uint64_t>());
      free_recs_[txnid_].ids = std::move(ids);
      continue;
    }
    mop_len = static_cast<int64_t>(mop_.size());
    if (total_room >= mop_len) {
      if (total_room == mop_len || --more < 0) break;
    } else if (head_room >= maxfree && head_id > 1) {
      head_id--;
      head_room = 0;
    }
    total_room -= head_room;
    head_room = mop_len - total_room;
    if (head_room > maxfree && head_id > 1) {
      head_room /= static_cast<int64_t>(head_id);
      head_room += maxfree - head_room % (maxfree + 1);
    } else if (head_room < 0) {
      head_room = 0;
    }
    DLFS_RETURN_IF_ERROR(put_free(head_id, static_cast<uint32_t>((head_room + 1) * 8)));
    free_recs_[head_id].ids.clear();
    total_room += head_room;
  }

  // Fill the reserved records in key order with the smallest page numbers
  // first; a record with more room than pages left is shrunk.
  if (mop_len > 0) {
    int64_t end = mop_len;  // mop_[0, end) not yet stored
    uint64_t after = 0;
    bool first = true;
    for (;;) {
      auto it = first ? free_recs_.begin() : free_recs_.upper_bound(after);
      first = false;
      if (it == free_recs_.end()) break;
      const uint64_t key = it->first;
      after = key;
      int64_t len = static_cast<int64_t>(it->second.dsize / 8) - 1;
      uint32_t dsize = it->second.dsize;
      if (len > end) {
        len = end;
        dsize = static_cast<uint32_t>((len + 1) * 8);
      }
      if (len < 0) return internal("free record smaller than an IDL header");
      std::vector<uint64_t> ids(mop_.begin() + (end - len), mop_.begin() + end);
      DLFS_RETURN_IF_ERROR(put_free(key, dsize));
      free_recs_[key].ids = std::move(ids);
      end -= len;
      if (end == 0) break;
    }
  }
  return Status::ok();
}

}  // namespace dlfs::provenance::lmdb::replay_model
