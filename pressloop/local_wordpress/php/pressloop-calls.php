<?php
/*
 * Plugin Name: Pressloop calls
 * Description: Lets Pressloop find exactly what one of its steps created, after a crash. Each
 *              create Pressloop sends over the REST API carries an `X-Pressloop-Call` header
 *              (run and step); this plugin stores it on the new post, page, media item, term,
 *              user or comment (meta `_pressloop_call`) and answers
 *              GET /wp-json/pressloop/v1/calls?marker=... with the objects that carry it.
 * Version: 1
 * Requires at least: 6.1
 *
 * Install it as a must-use plugin: copy this file into wp-content/mu-plugins/. Without it
 * Pressloop still works; it then recognises an interrupted create by what it wrote (title,
 * content, name), which is exact for users and terms but only nearly so for posts, comments and
 * media. The meta key starts with "_", so WordPress keeps it out of the REST answers.
 * Shipped with Pressloop as pressloop/local_wordpress/php/pressloop-calls.php.
 */

const PRESSLOOP_CALL_META = '_pressloop_call';

/** The request's marker, or '' when it has none or an odd one. */
function pressloop_call_marker(WP_REST_Request $request): string
{
    $marker = (string) $request->get_header('X-Pressloop-Call');
    return preg_match('/^[A-Za-z0-9:._-]{1,190}$/', $marker) ? $marker : '';
}

/** Tag what a REST request creates with the request's marker (updates are left alone). */
function pressloop_calls_tag_creates(): void
{
    $tag = static function (string $type): callable {
        return static function ($object, WP_REST_Request $request, bool $creating) use ($type): void {
            $marker = pressloop_call_marker($request);
            if (!$creating || $marker === '') {
                return;
            }
            switch ($type) {
                case 'post':
                    add_post_meta($object->ID, PRESSLOOP_CALL_META, $marker);
                    break;
                case 'term':
                    add_term_meta($object->term_id, PRESSLOOP_CALL_META, $marker);
                    break;
                case 'user':
                    add_user_meta($object->ID, PRESSLOOP_CALL_META, $marker);
                    break;
                case 'comment':
                    add_comment_meta($object->comment_ID, PRESSLOOP_CALL_META, $marker);
                    break;
            }
        };
    };
    // Post types and taxonomies are all registered by now; media are the `attachment` type.
    foreach (get_post_types(['show_in_rest' => true]) as $post_type) {
        add_action("rest_insert_{$post_type}", $tag('post'), 10, 3);
    }
    foreach (get_taxonomies(['show_in_rest' => true]) as $taxonomy) {
        add_action("rest_insert_{$taxonomy}", $tag('term'), 10, 3);
    }
    add_action('rest_insert_user', $tag('user'), 10, 3);
    add_action('rest_insert_comment', $tag('comment'), 10, 3);
}

/** Every object that carries `marker`: [{kind: post|term|user|comment, type, id}]. */
function pressloop_calls_lookup(WP_REST_Request $request): array
{
    global $wpdb;
    $marker = (string) $request['marker'];
    $found = [];
    $rows = $wpdb->get_results($wpdb->prepare(
        "SELECT p.ID AS id, p.post_type AS type FROM {$wpdb->postmeta} m"
        . " JOIN {$wpdb->posts} p ON p.ID = m.post_id WHERE m.meta_key = %s AND m.meta_value = %s",
        PRESSLOOP_CALL_META,
        $marker
    ));
    foreach ($rows as $row) {
        $found[] = ['kind' => 'post', 'type' => $row->type, 'id' => (int) $row->id];
    }
    $rows = $wpdb->get_results($wpdb->prepare(
        "SELECT t.term_id AS id, t.taxonomy AS type FROM {$wpdb->termmeta} m"
        . " JOIN {$wpdb->term_taxonomy} t ON t.term_id = m.term_id"
        . " WHERE m.meta_key = %s AND m.meta_value = %s",
        PRESSLOOP_CALL_META,
        $marker
    ));
    foreach ($rows as $row) {
        $found[] = ['kind' => 'term', 'type' => $row->type, 'id' => (int) $row->id];
    }
    $ids = $wpdb->get_col($wpdb->prepare(
        "SELECT user_id FROM {$wpdb->usermeta} WHERE meta_key = %s AND meta_value = %s",
        PRESSLOOP_CALL_META,
        $marker
    ));
    foreach ($ids as $id) {
        $found[] = ['kind' => 'user', 'type' => 'user', 'id' => (int) $id];
    }
    $ids = $wpdb->get_col($wpdb->prepare(
        "SELECT comment_id FROM {$wpdb->commentmeta} WHERE meta_key = %s AND meta_value = %s",
        PRESSLOOP_CALL_META,
        $marker
    ));
    foreach ($ids as $id) {
        $found[] = ['kind' => 'comment', 'type' => 'comment', 'id' => (int) $id];
    }
    return ['marker' => $marker, 'version' => 1, 'objects' => $found];
}

add_action('rest_api_init', static function (): void {
    pressloop_calls_tag_creates();
    register_rest_route('pressloop/v1', '/calls', [
        'methods' => 'GET',
        'callback' => 'pressloop_calls_lookup',
        // Only ids come back, but only to someone who may edit content.
        'permission_callback' => static fn (): bool => current_user_can('edit_posts'),
        'args' => [
            'marker' => [
                'type' => 'string',
                'required' => true,
                'pattern' => '^[A-Za-z0-9:._-]{1,190}$',
            ],
        ],
    ]);
});
