# Sourced by run.sh on a GPU machine without Qt (the H200 image is Ubuntu 24.04 with no
# Qt and no sqlite3.h): Debian 12's Qt 6, QCustomPlot and SQLite packages, fetched on a
# Debian machine with
#   mkdir -p .deps/qt-debs && cd .deps/qt-debs && apt-get download $(cat ../../tests/gpu/qt-debs.txt)
# travel with the tree (.deps is git-ignored) and are unpacked here into .deps/qt-root.
# Libraries the system already has (same soname) are removed from the unpacked copy, so
# the system's newer builds are used and only what is missing comes from Debian.
# Exports QT_ROOT, LD_LIBRARY_PATH, QT_PLUGIN_PATH, FONTCONFIG_FILE and QT_CMAKE_ARGS.
QT_CMAKE_ARGS=()
if ls .deps/qt-debs/*.deb >/dev/null 2>&1; then
  QT_ROOT=$PWD/.deps/qt-root
  rm -rf "$QT_ROOT" && mkdir -p "$QT_ROOT"
  for f in .deps/qt-debs/*.deb; do dpkg -x "$f" "$QT_ROOT"; done
  lib=$QT_ROOT/usr/lib/x86_64-linux-gnu
  # Some Debian 12 packages (libdbus-1-3, libexpat1, ...) still ship under /lib.
  if [ -d "$QT_ROOT/lib/x86_64-linux-gnu" ]; then
    cp -a "$QT_ROOT/lib/x86_64-linux-gnu/." "$lib/" && rm -rf "$QT_ROOT/lib/x86_64-linux-gnu"
  fi
  system_sonames=$(ldconfig -p | awk '{print $1}' | sort -u)
  qt_verdefs() { objdump -p "$1" 2>/dev/null | awk '/Version definitions/{f=1; next} /Version References/{f=0} f && NF >= 4 {print $4}' | sort -u; }
  pruned=0
  for so in "$lib"/*.so.*; do
    [ -f "$so" ] && [ ! -L "$so" ] || continue
    name=$(basename "$so")
    case "$name" in libQt6*|libqcustomplot*) continue ;; esac
    soname=$(objdump -p "$so" 2>/dev/null | awk '/SONAME/{print $2}')
    [ -n "$soname" ] || continue
    system=$(ldconfig -p | awk -v s="$soname" '$1 == s && $NF ~ /^(\/usr)?\/lib\/x86_64-linux-gnu\// {print $NF; exit}')
    [ -n "$system" ] || continue
    # Kept unless the system's copy defines every symbol version Debian's does.
    if [ -n "$(comm -23 <(qt_verdefs "$so") <(qt_verdefs "$system"))" ]; then continue; fi
    # Links to the dropped file (libX.so for the linker, libX.so.N) point to the system's.
    for link in "$lib"/*.so*; do
      if [ -L "$link" ] && [ "$(readlink -f "$link")" = "$(readlink -f "$so")" ]; then
        ln -sf "$system" "$link"
      fi
    done
    rm -f "$so"; pruned=$((pruned + 1)); echo "  $soname: the system's $system"
  done
  echo "Qt from Debian packages in $QT_ROOT ($pruned libraries the system has were dropped)"
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export QT_PLUGIN_PATH=$lib/qt6/plugins
  mkdir -p "$QT_ROOT/fontconfig"
  cat >"$QT_ROOT/fontconfig/fonts.conf" <<XML
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <dir>$QT_ROOT/usr/share/fonts</dir>
  <dir>/usr/share/fonts</dir>
  <cachedir>$QT_ROOT/fontconfig/cache</cachedir>
  <include ignore_missing="yes">$QT_ROOT/etc/fonts/conf.d</include>
</fontconfig>
XML
  export FONTCONFIG_FILE=$QT_ROOT/fontconfig/fonts.conf
  QT_CMAKE_ARGS=(-DFP8WB_GUI=ON "-DQT_ADDITIONAL_PACKAGES_PREFIX_PATH=$QT_ROOT/usr")
  QT_PREFIX=$QT_ROOT/usr
fi
