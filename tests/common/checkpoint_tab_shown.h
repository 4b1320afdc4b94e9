// defines: fp8wb::test::shown_with_file(): a Checkpoints tab on screen at a given size,
// a checkpoint opened in it and analysed (the GUI tests' common start).
#pragma once

#include <QSignalSpy>
#include <QtTest>

#include "fp8wb/views/checkpoint/checkpoint_tab.h"

namespace fp8wb::test {

// False where the tab was not shown or the file not analysed within a minute.
inline bool shown_with_file(CheckpointTab& tab, const QString& path, int width, int height) {
  tab.resize(width, height);
  tab.show();
  if (!QTest::qWaitForWindowExposed(&tab)) return false;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(path);
  return loaded.wait(60000);
}

}  // namespace fp8wb::test
