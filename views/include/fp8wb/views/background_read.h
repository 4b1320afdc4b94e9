// defines: read_in_background(): runs a read (of the run store, say) on a pool thread and
// hands its result, or its error message, to a receiver on the GUI thread. Nothing that
// can wait on a disk or a lock runs on the GUI thread; a receiver destroyed meanwhile
// gets nothing.
#pragma once

#include <QMetaObject>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QThreadPool>
#include <exception>
#include <functional>
#include <memory>
#include <string>

namespace fp8wb {

template <class T>
void read_in_background(QObject* receiver, std::function<T()> read, std::function<void(T)> done,
                        std::function<void(const QString&)> failed = {}) {
  QPointer<QObject> guard(receiver);
  QThreadPool::globalInstance()->start([guard, read, done, failed] {
    auto result = std::make_shared<T>();
    QString error;
    try {
      *result = read();
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    if (!guard) return;
    QMetaObject::invokeMethod(
        guard.data(),
        [guard, result, error, done, failed] {
          if (!guard) return;
          if (error.isEmpty()) {
            done(std::move(*result));
          } else if (failed) {
            failed(error);
          }
        },
        Qt::QueuedConnection);
  });
}

}  // namespace fp8wb
