<?php
/*
 * Router for PHP's built-in server (`php -S 127.0.0.1:PORT -t DOCROOT router.php`).
 *
 * Files and folders with an index.php are served as they are; every other path goes to
 * WordPress's index.php, as Apache's rewrite rules would do, so pretty permalinks and /wp-json/
 * work. Written by pressloop/local_wordpress/local_site.py; never edit a copy by hand.
 */
$path = urldecode(parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH) ?: '/');
$file = $_SERVER['DOCUMENT_ROOT'] . $path;
if (is_file($file) || (is_dir($file) && is_file(rtrim($file, '/') . '/index.php'))) {
    return false;
}
$_SERVER['SCRIPT_NAME'] = '/index.php';
$_SERVER['PHP_SELF'] = '/index.php';
$_SERVER['SCRIPT_FILENAME'] = $_SERVER['DOCUMENT_ROOT'] . '/index.php';
chdir($_SERVER['DOCUMENT_ROOT']);
require $_SERVER['SCRIPT_FILENAME'];
