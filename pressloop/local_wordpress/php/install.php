<?php
/*
 * Installs WordPress into the empty database of a local site, as `wp core install` would, then
 * prints JSON: {"user_id": ..., "app_password": "..."}.
 *
 * Usage: php install.php DOCROOT < settings.json
 * settings.json: {"title", "admin_user", "admin_password", "admin_email", "permalink_structure"}
 */
$settings = json_decode(stream_get_contents(STDIN), true, 16, JSON_THROW_ON_ERROR);
define('WP_INSTALLING', true);
require $argv[1] . '/wp-load.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';

if (is_blog_installed()) {
    fwrite(STDERR, "WordPress is already installed in this database\n");
    exit(1);
}
$installed = wp_install(
    $settings['title'],
    $settings['admin_user'],
    $settings['admin_email'],
    true,
    '',
    wp_slash($settings['admin_password'])
);

global $wp_rewrite;
$wp_rewrite->set_permalink_structure($settings['permalink_structure']);
flush_rewrite_rules(false);

$created = WP_Application_Passwords::create_new_application_password(
    $installed['user_id'],
    ['name' => 'pressloop']
);
if (is_wp_error($created)) {
    fwrite(STDERR, 'could not create an application password: ' . $created->get_error_message() . "\n");
    exit(1);
}
echo json_encode(['user_id' => $installed['user_id'], 'app_password' => $created[0]]);
