// Config structs declared from key lists, so that each key of dlfsd's config
// is written in one place. A key list is an X-macro, one entry per key:
//
//   KEY(member, Type, default, "flag", help, checks...)
//
// `member` is also the TOML key; "flag" holds CLI11's names ("-m,--mountpoint",
// "" for none); help is the key's meaning for --help and docs/configuration.md;
// checks are calls on fs/config/config_keys.cc's Key (.range(1, 4096),
// .bytes(4096), .note("..."), ...), compiled only there. An enum Type is a
// choice among its names (common/enum_names.h).
//
// A struct expands its list with DLFS_KEY_MEMBER into `Type member = default;`;
// fs/config/config_keys.cc expands every list into the rows of the key table.
#pragma once

#define DLFS_KEY_MEMBER(member, Type, default_value, ...) Type member = default_value;
