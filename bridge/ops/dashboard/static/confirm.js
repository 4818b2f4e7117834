// @ts-check
// The page's confirmation dialog (<dialog id="confirm">), in place of window.confirm.
import { byId } from './dom.js';

/**
 * Shows `message`; resolves true on Confirm, false on Cancel or Escape. danger: a red Confirm.
 * @param {string} message
 * @returns {Promise<boolean>}
 */
export function confirmAction(message, danger = false) {
  const dialog = /** @type {HTMLDialogElement} */ (byId('confirm'));
  const ok = byId('confirm-ok');
  const cancel = byId('confirm-cancel');
  byId('confirm-message').textContent = message;
  ok.classList.toggle('danger', danger);
  return new Promise((resolve) => {
    /** @param {boolean} answer */
    const finish = (answer) => {
      ok.removeEventListener('click', onOk);
      cancel.removeEventListener('click', onCancel);
      dialog.removeEventListener('close', onClose);
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    const onOk = () => finish(true);
    const onCancel = () => finish(false);
    const onClose = () => finish(false);
    ok.addEventListener('click', onOk);
    cancel.addEventListener('click', onCancel);
    dialog.addEventListener('close', onClose);
    dialog.showModal();
    cancel.focus();
  });
}
