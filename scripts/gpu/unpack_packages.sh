#!/usr/bin/env bash
# Adds the files of the .debs in DIR (scripts/gpu/pack_packages.sh) that this machine lacks,
# never replacing one, then the alternatives links and ldconfig that dpkg's scripts would have
# made. For a GPU machine without a package registry; prints what it added.
#   scripts/gpu/unpack_packages.sh DIR
set -uo pipefail
dir=${1:?usage: unpack_packages.sh DIR}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for deb in "$dir"/*.deb; do dpkg-deb -x "$deb" "$stage" || echo "cannot unpack $deb"; done
# merged /usr: the packages' /lib and /bin go under /usr
for d in lib lib64 bin sbin; do
  if [[ -d $stage/$d && ! -L $stage/$d ]]; then
    mkdir -p "$stage/usr/$d"
    cp -a "$stage/$d/." "$stage/usr/$d/"
    rm -rf "${stage:?}/$d"
  fi
done
added=0
while IFS= read -r -d '' file; do
  target=${file#"$stage"}
  if [[ ! -e $target && ! -L $target ]]; then
    mkdir -p "$(dirname "$target")"
    cp -a "$file" "$target"
    added=$((added + 1))
  fi
done < <(find "$stage" \( -type f -o -type l \) -print0)
echo "unpack_packages.sh: $added files added"
link() { [[ -e $2 || -L $2 ]] || { [[ -e $1 ]] && ln -s "$1" "$2" && echo "link $2 -> $1"; }; }
for tool in mpirun mpiexec mpicc mpicxx mpic++ ompi_info; do link "/usr/bin/$tool.openmpi" "/usr/bin/$tool"; done
lib=/usr/lib/x86_64-linux-gnu
link "$lib/openblas-serial/libopenblas.so.0" "$lib/libopenblas.so.0"
ldconfig
